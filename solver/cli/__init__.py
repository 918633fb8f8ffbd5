"""The `meshsat` command line: one typer app, each command in its own module.

Exit codes: 0 success (valid), 1 the answer is negative (invalid layout, no fix),
2 bad input, 130 interrupted. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import sys

import typer

from solver.cli.diff_cmd import diff_cmd
from solver.cli.enumerate_cmd import enumerate_cmd
from solver.cli.fix_cmd import fix_cmd
from solver.cli.groups_cmd import groups_cmd
from solver.cli.plan_cmd import plan_cmd
from solver.cli.rules_cmd import fields_cmd, rules_cmd
from solver.cli.validate_cmd import validate_cmd
from solver.errors import MeshsatError

app = typer.Typer(
    name="meshsat",
    help="Which SGLang parallel layouts are legal, why yours is rejected, and the nearest "
    "one that works.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("validate")(validate_cmd)
app.command("fix")(fix_cmd)
app.command("enumerate")(enumerate_cmd)
app.command("groups")(groups_cmd)
app.command("plan")(plan_cmd)
app.command("rules")(rules_cmd)
app.command("fields")(fields_cmd)
app.command("diff")(diff_cmd)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app, turning meshsat errors into exit status 2."""
    try:
        app(args=argv, prog_name="meshsat")
    except MeshsatError as exc:
        from solver.cli.output import err

        err.print(f"meshsat: error: {exc}", markup=False, highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
