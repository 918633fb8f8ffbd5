"""`meshsat serve`'s page in a real browser: Debian's headless Chromium through Selenium.

One server and one browser for the module. The page's answers are checked against the CLI
(the same input through `meshsat ... --format json`, in-process). Skipped, with the reason,
when Selenium, /usr/bin/chromium or /usr/bin/chromedriver is missing (README, "serve", says
how to install them).

`MESHSAT_SCREENSHOTS=docs` saves a screenshot of each view there (the README's images).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.web import make_server
from tests.cli_helpers import run_cli

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REJECTED = "python -m sglang.launch_server --tp 8 --dp 3 --enable-dp-attention"
TWO_NODES = "python -m sglang.launch_server --tp 16 --dp 4 --enable-dp-attention --ep 16 --nnodes 2"


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (a dev dependency: make .venv/.meshsat-installed)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    return None


if (_why := _missing()) is not None:
    pytest.skip(f"browser tests skipped: {_why}", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

SHOTS = os.environ.get("MESHSAT_SCREENSHOTS")


@pytest.fixture(scope="module")
def page() -> Iterator[tuple[WebDriver, str]]:
    server = make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    profile = tempfile.mkdtemp(prefix="meshsat-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver, server.url
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
        shutil.rmtree(profile, ignore_errors=True)


def wait(driver: WebDriver, css: str, count: int = 1) -> list[WebElement]:
    """The visible elements matching `css`, once there are at least `count`."""

    def found(d: WebDriver) -> list[WebElement] | bool:
        shown = [e for e in d.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]
        return shown if len(shown) >= count else False

    result: list[WebElement] = WebDriverWait(driver, 60, poll_frequency=0.05).until(found)
    return result


def open_view(driver: WebDriver, url: str, view: str) -> None:
    driver.get(f"{url}#{view}")
    wait(driver, "body[data-ready]")


def fill(driver: WebDriver, form: str, name: str, value: str) -> None:
    el = driver.find_element(By.CSS_SELECTOR, f'#{form}-form [name="{name}"]')
    el.clear()
    el.send_keys(value)


def shot(driver: WebDriver, name: str) -> None:
    if SHOTS:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1440, min(int(height) + 240, 2400))
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"web-{name}.png"))
        driver.set_window_size(1280, 1000)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    return json.loads(run_cli(capsys, *args, "--format", "json").out)


def test_plan_shows_the_ranked_table_and_the_chart(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    driver, url = page
    driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}
    )
    open_view(driver, url, "plan")
    fill(driver, "plan", "gpus", "16")
    driver.find_element(By.ID, "plan-run").click()
    rows = wait(driver, "#plan-table tbody tr")
    expected = cli(capsys, "plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200",
                   "--gpus", "16")["layouts"]  # fmt: skip
    assert len(rows) == len(expected) == 20
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#plan-table th")]
    # The document's keys, the estimate's source moved up beside the rank.
    keys = [k for k in expected[0] if k != "command"]
    if "source" in keys:
        keys.remove("source")
        keys.insert(1, "source")
    assert heads == keys
    first = [td.text for td in rows[0].find_elements(By.TAG_NAME, "td")]
    assert first[heads.index("total_kv_tokens")] == f"{expected[0]['total_kv_tokens']:,}"
    points = driver.find_elements(By.CSS_SELECTOR, "#plan-chart circle")
    assert len(points) == len(expected)
    assert driver.find_elements(By.CSS_SELECTOR, "#plan-chart polyline.front")
    caption = driver.find_element(By.ID, "plan-caption").text
    if "tokens_per_s_gpu" in expected[0]:  # the estimates (plan --rank perf, the default)
        assert caption.startswith("Output tokens/s per GPU against tokens/s per user")
    else:
        assert "no throughput estimates" in caption
    # Clicking a point selects its layout: its row is highlighted, its command shown.
    last = driver.find_element(By.CSS_SELECTOR, '#plan-chart circle[data-rank="7"]')
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click'))", last)
    selected = wait(driver, "#plan-table tr.selected")[0]
    assert selected.get_attribute("data-rank") == "7"
    assert driver.find_element(By.ID, "plan-command").text == expected[6]["command"]
    # Its memory per rank comes from `validate --gpu` on that command: the same weights.
    memory = wait(driver, "#plan-memory dl")[0].text
    assert f"weights\n{expected[6]['weights_gib']:.2f} GiB" in memory
    # Its LeaderWorkerSet downloads as a file: what `plan --emit lws --pick 7` prints.
    driver.find_element(By.ID, "plan-lws").click()
    wait(driver, "#plan-lws-status")
    saved = tmp_path / "sglang-rank7.yaml"
    WebDriverWait(driver, 60, poll_frequency=0.05).until(lambda d: saved.is_file())
    lws = run_cli(capsys, "plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200",
                  "--gpus", "16", "--emit", "lws", "--pick", "7")  # fmt: skip
    assert lws.code == 0 and saved.read_text() == lws.out
    # The estimate inputs appear only when `plan` has those options.
    isl = driver.find_element(By.CSS_SELECTOR, '#plan-form [name="isl"]')
    assert isl.is_displayed() == ("--isl" in run_cli(capsys, "plan", "--help").out)
    shot(driver, "plan")


def plan_qwen3_8b_on_4_h100(driver: WebDriver) -> list[WebElement]:
    """Plan Qwen3-8B on 4 H100 (top 3) with the form's other fields as they are; the rows."""
    fill(driver, "plan", "model", "Qwen/Qwen3-8B")
    fill(driver, "plan", "gpus", "4")
    fill(driver, "plan", "top", "3")
    Select(driver.find_element(By.CSS_SELECTOR, '#plan-form [name="gpu"]')).select_by_value("H100")
    driver.find_element(By.ID, "plan-run").click()
    # The table shows the previous answer until this one is in: wait for this one's line.
    progress = driver.find_element(By.ID, "plan-progress")
    WebDriverWait(driver, 60, poll_frequency=0.05).until(
        lambda d: progress.text.startswith("3 layouts in")
    )
    return wait(driver, "#plan-table tbody tr", 3)


def restore_plan_form(driver: WebDriver) -> None:
    """The form as the other tests expect it (the page keeps its fields between views)."""
    for name, value in (("model", "deepseek-ai/DeepSeek-V3"), ("gpus", "16"), ("top", "20")):
        fill(driver, "plan", name, value)
    Select(driver.find_element(By.CSS_SELECTOR, '#plan-form [name="gpu"]')).select_by_value("H200")


def test_plan_estimates_come_from_the_chosen_engine(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The estimator menu is `plan --engine`: its three choices, `auto` first chosen, the
    CLI's help as its hint; the choice reaches the request (each row's source is the one the
    CLI names for that engine), and `--rank kv`, which estimates nothing, puts it away."""
    driver, url = page
    open_view(driver, url, "plan")
    menu = Select(driver.find_element(By.CSS_SELECTOR, '#plan-form [name="engine"]'))
    help_text = run_cli(capsys, "plan", "--help").out
    assert [o.get_attribute("value") for o in menu.options] == ["auto", "aic", "roofline"]
    assert menu.first_selected_option.get_attribute("value") == "auto"
    hint = menu.first_selected_option.find_element(By.XPATH, "..").get_attribute("title") or ""
    # The hint is the CLI's --help text (there wrapped, even inside words: compare it
    # without the white space).
    assert hint.startswith("auto: AIConfigurator")
    assert "".join(hint.split()) in "".join(help_text.replace("│", "").split())
    menu.select_by_value("roofline")
    rows = plan_qwen3_8b_on_4_h100(driver)
    doc = cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4",
              "--top", "3", "--engine", "roofline")  # fmt: skip
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#plan-table th")]
    sources = [r.find_elements(By.TAG_NAME, "td")[heads.index("source")].text for r in rows]
    assert sources == [r["source"] for r in doc["layouts"]] == ["roofline"] * 3
    rank = Select(driver.find_element(By.CSS_SELECTOR, '#plan-form [name="rank"]'))
    rank.select_by_value("kv")
    assert not driver.find_element(By.ID, "plan-engine").is_displayed()
    rank.select_by_value("perf")
    assert driver.find_element(By.ID, "plan-engine").is_displayed()
    menu.select_by_value("auto")
    restore_plan_form(driver)


def test_plan_quantization_reaches_the_request(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The quantization menu is `plan --quantization`: first the checkpoint's own scheme
    (nothing sent), then the field's values; a choice reaches the request (the weights and
    each command are the CLI's for that flag)."""
    driver, url = page
    open_view(driver, url, "plan")
    menu = Select(driver.find_element(By.CSS_SELECTOR, '#plan-form [name="quantization"]'))
    values = [o.get_attribute("value") for o in menu.options]
    assert values[0] == "" and menu.first_selected_option.get_attribute("value") == ""
    assert "fp8" in values and "w8a8_fp8" in values
    assert driver.find_element(By.ID, "plan-quantization").is_displayed()
    menu.select_by_value("fp8")
    rows = plan_qwen3_8b_on_4_h100(driver)
    doc = cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4",
              "--top", "3", "--quantization", "fp8")  # fmt: skip
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#plan-table th")]
    weights = [r.find_elements(By.TAG_NAME, "td")[heads.index("weights_gib")].text for r in rows]
    assert weights == [f"{r['weights_gib']:.2f}" for r in doc["layouts"]]
    first = driver.find_element(By.CSS_SELECTOR, '#plan-chart circle[data-rank="1"]')
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click'))", first)
    wait(driver, "#plan-table tr.selected")
    command = driver.find_element(By.ID, "plan-command").text
    assert command == doc["layouts"][0]["command"] and command.endswith("--quantization fp8")
    menu.select_by_value("")
    restore_plan_form(driver)


def test_a_pasted_rejected_command_shows_its_violations_and_a_fix(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str]
) -> None:
    driver, url = page
    open_view(driver, url, "check")
    fill(driver, "check", "sglang", REJECTED)
    fill(driver, "check", "gpus", "8")
    driver.find_element(By.ID, "check-run").click()
    wait(driver, "#check-diff")
    report = cli(capsys, "validate", "--sglang", REJECTED)
    shown = [
        e.text
        for e in driver.find_elements(By.CSS_SELECTOR, "#check-violations tbody td:first-child")
    ]
    assert shown == [v["rule"] for v in report["violations"]]
    assert driver.find_element(By.ID, "check-verdict").text.startswith("✗ invalid")
    hot = {e.text for e in driver.find_elements(By.CSS_SELECTOR, "#check-conflict .chip.hot")}
    assert hot == set(report["conflict"])
    notes = driver.find_element(By.ID, "check-notes")
    assert notes.find_element(By.TAG_NAME, "h3").text == "what SGLang would silently change"
    said = notes.get_attribute("textContent") or ""
    assert report["notes"] and all(n["text"] in said for n in report["notes"])
    best = cli(capsys, "fix", "--sglang", REJECTED, "--gpus", "8")["fixes"][0]
    panel = driver.find_element(By.ID, "check-fix-panel").text
    assert best["command_line"] in panel
    for change in best["changes"]:
        assert change["field"] in panel
    added = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#check-diff .add")]
    assert added and all(line.startswith("+ ") for line in added)
    shot(driver, "check")


def test_a_bad_gpu_count_shows_the_cli_error_beside_the_field(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str]
) -> None:
    driver, url = page
    open_view(driver, url, "plan")
    fill(driver, "plan", "gpus", "0")
    driver.find_element(By.ID, "plan-run").click()
    slot = wait(driver, '#plan-form .err[data-for="gpus"]')[0]
    run = run_cli(capsys, "plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200",
                  "--gpus", "0")  # fmt: skip
    assert run.code == 2
    assert slot.text == run.err.strip() and "\n" not in slot.text
    # Beside the field: the slot follows the GPUs input in the same row.
    label = driver.find_element(By.CSS_SELECTOR, '#plan-form [name="gpus"]').find_element(
        By.XPATH, ".."
    )
    following = label.find_element(By.XPATH, "following-sibling::*[1]")
    assert following.get_attribute("data-for") == "gpus"
    shot(driver, "error")


def test_groups_of_a_two_node_layout_render(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str]
) -> None:
    driver, url = page
    open_view(driver, url, "groups")
    fill(driver, "groups", "sglang", TWO_NODES)
    driver.find_element(By.ID, "groups-run").click()
    wait(driver, "#groups-grid .gpu", 16)
    doc = cli(capsys, "groups", "--sglang", TWO_NODES)
    nodes = driver.find_elements(By.CSS_SELECTOR, "#groups-grid .node")
    assert len(nodes) == 2
    for node in nodes:
        n = int(node.get_attribute("data-node") or -1)
        ranks = [
            int(c.get_attribute("data-rank") or -1)
            for c in node.find_elements(By.CSS_SELECTOR, ".gpu")
        ]
        assert ranks == [r["rank"] for r in doc["ranks"] if r["node"] == n]
    colours = driver.execute_script(
        "const o = {}; for (const c of document.querySelectorAll('#groups-grid .gpu'))"
        " o[c.dataset.rank] = getComputedStyle(c).backgroundColor; return o;"
    )
    # Coloured by attention-TP group (the default): ranks share a colour exactly when they
    # share a group.
    group = {str(r): i for i, g in enumerate(doc["groups"]["attn_tp"]) for r in g}
    assert len(set(group.values())) == 4
    assert all((colours[a] == colours[b]) == (group[a] == group[b]) for a in group for b in group)
    traffic = {
        row.find_elements(By.TAG_NAME, "td")[0].text: row.find_elements(By.TAG_NAME, "td")[3].text
        for row in driver.find_elements(By.CSS_SELECTOR, "#groups-kinds tbody tr")
    }
    assert traffic["ep"].startswith("network") and traffic["attn_tp"].startswith("NVLink")
    shot(driver, "groups")


#: A PD script: a prefill and a decode server on their own hosts, and a router.
PD_SCRIPT = (
    "python3 -m sglang.launch_server --model-path m --disaggregation-mode prefill --tp 4 "
    "--host 10.0.0.1 --port 30000 &\n"
    "python3 -m sglang.launch_server --model-path m --disaggregation-mode decode --tp 2 "
    "--host 10.0.0.2 --port 30001 &\n"
    "python3 -m sglang_router.launch_router --pd-disaggregation "
    "--prefill http://10.0.0.1:30000 --decode http://10.0.0.2:30001"
)


def test_groups_of_a_pd_script_name_every_server(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The API answers a PD script with one entry per server (`roles`); the page read it
    as one layout and showed "undefined" and "too many ranks to draw" (a server with an
    invalid layout: a script error). Each server is named with its summary, its grid drawn."""
    driver, url = page
    open_view(driver, url, "groups")
    for script in (PD_SCRIPT, PD_SCRIPT.replace("--tp 2", "--tp 3")):
        doc = cli(capsys, "groups", "--sglang", script)
        fill(driver, "groups", "sglang", script)
        driver.find_element(By.ID, "groups-run").click()
        wait(driver, "#groups-summary .server", 2)
        summary = driver.find_element(By.ID, "groups-summary").text
        assert "undefined" not in summary
        for role in doc["roles"]:
            line = role.get("summary") or "invalid layout: " + ", ".join(
                v["rule"] for v in role["report"]["violations"]
            )
            assert f"{role['server']} ({role['role']}): {line}" in summary
        drawn = [r for r in doc["roles"] if "ranks" in r]
        cells = driver.find_elements(By.CSS_SELECTOR, "#groups-grid .gpu")
        assert len(cells) == sum(len(r["ranks"]) for r in drawn)
        driver.execute_script("document.querySelector('#groups-summary').innerHTML = ''")


def test_compare_releases_shows_the_diff(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str]
) -> None:
    driver, url = page
    open_view(driver, url, "compare")
    # Valid on 0.5.19; 0.5.23 added DCP-NO-PREFILL-CP, which it breaks.
    command = "python -m sglang.launch_server --tp 8 --dcp-size 2 --enable-prefill-cp "
    command += "--cp-strategy zigzag"
    fill(driver, "compare", "sglang", command)
    driver.find_element(By.ID, "compare-run").click()
    wait(driver, "#compare-layout")
    doc = cli(capsys, "diff", "0.5.19", "0.5.23", "--sglang", command)
    text = driver.find_element(By.ID, "compare-out").text
    assert text.startswith("SGLang 0.5.19 → 0.5.23")
    for rule in doc["rules"]["added"]:
        assert rule["id"] in text
    lines = driver.find_element(By.ID, "compare-layout").text.splitlines()[1:]
    verdicts = [line for line in lines if line.split(":")[0] in doc["layout"]["valid"]]
    # 0.5.23 resolves decode CP's communication backend to a2a on CUDA (0.5.19: ag_rs).
    assert "resolved dcp_comm_backend: ag_rs → a2a" in lines
    assert verdicts == [
        f"{v}: valid" if ok else f"{v}: invalid ({', '.join(doc['layout']['violations'][v])})"
        for v, ok in doc["layout"]["valid"].items()
    ]
    assert verdicts == ["0.5.19: valid", "0.5.23: invalid (DCP-NO-PREFILL-CP)"]
    shot(driver, "compare")


def test_rows_with_throughput_estimates_draw_the_pareto_chart(page: tuple[WebDriver, str]) -> None:
    """The chart reads the columns the rows carry: rows with tokens/s per GPU and per user
    (the performance estimates' columns) get that Pareto chart, no page change needed."""
    driver, url = page
    open_view(driver, url, "plan")
    points = [(10, 900), (20, 800), (30, 850), (40, 500), (15, 700), (40, 450), (5, 950)]
    rows = [
        {"rank": i, "tp": 8, "tokens_per_s_user": x, "tokens_per_s_gpu": y, "source": "test",
         "command": f"cmd {i}"}
        for i, (x, y) in enumerate(points, 1)
    ]  # fmt: skip
    document = {"gpu": "H200", "ranking": "by tokens/s per GPU", "layouts": rows}
    # As JSON text: the driver would hand a dict over with its keys sorted.
    driver.execute_script("drawPlan(JSON.parse(arguments[0]))", json.dumps(document))
    labels = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#plan-chart text")]
    assert "tokens_per_s_user" in labels and "tokens_per_s_gpu" in labels
    assert (
        "tokens/s per GPU against tokens/s per user"
        in driver.find_element(By.ID, "plan-caption").text
    )
    # Brute force: a point is on the front when no other is at least as good on both axes
    # and better on one.
    front = {
        i
        for i, (x, y) in enumerate(points, 1)
        if not any(a >= x and b >= y and (a, b) != (x, y) for a, b in points)
    }
    shown = {
        int(c.get_attribute("data-rank") or -1)
        for c in driver.find_elements(By.CSS_SELECTOR, "#plan-chart circle.onfront")
    }
    assert shown == front == {1, 3, 4, 7}
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#plan-table th")]
    assert heads == ["rank", "source", "tp", "tokens_per_s_user", "tokens_per_s_gpu"]


def test_plan_with_disaggregation_shows_the_verdict_and_every_roles_command(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    driver, url = page
    driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}
    )
    open_view(driver, url, "plan")
    fill(driver, "plan", "model", "Qwen/Qwen3-8B")
    fill(driver, "plan", "gpus", "4")
    Select(driver.find_element(By.CSS_SELECTOR, '#plan-form [name="gpu"]')).select_by_value("H100")
    option = driver.find_element(By.ID, "plan-disagg")
    if not option.is_selected():
        option.click()
    # plan --disagg ranks by estimate only: the ranking choice is put away.
    assert not driver.find_element(By.CSS_SELECTOR, '#plan-form [name="rank"]').is_displayed()
    driver.find_element(By.ID, "plan-run").click()
    rows = wait(driver, "#disagg-table tbody tr")
    doc = cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4",
              "--disagg", "--top", "20")  # fmt: skip
    best = doc["deployments"][0]
    assert len(rows) == len(doc["deployments"]) > 0
    assert not driver.find_element(By.ID, "plan-out").is_displayed()
    assert driver.find_element(By.ID, "disagg-verdict").text == f"verdict: {doc['verdict_note']}"
    cells = [td.text for td in rows[0].find_elements(By.TAG_NAME, "td")]
    assert cells[:4] == ["1", best["prefill_layout"], best["decode_layout"],
                         f"{best['prefill_workers']}:{best['decode_workers']}"]  # fmt: skip
    assert cells[-1] == best["source"]
    # The first deployment is selected: every role's command, each with its copy button.
    assert driver.find_element(By.ID, "disagg-router").text == best["router_command"]
    assert driver.find_element(By.ID, "disagg-prefill").text == best["prefill_node_command"]
    assert driver.find_element(By.ID, "disagg-decode").text == best["decode_node_command"]
    buttons = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#disagg-detail button")]
    assert buttons == ["Copy", "Copy", "Copy", "Download LeaderWorkerSets"]
    # Its manifests download as a file: what `plan --disagg --emit lws --pick 1` prints.
    driver.find_element(By.ID, "disagg-lws").click()
    saved = tmp_path / "sglang-pd-rank1.yaml"
    WebDriverWait(driver, 60, poll_frequency=0.05).until(lambda d: saved.is_file())
    lws = run_cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4",
                  "--disagg", "--emit", "lws", "--pick", "1")  # fmt: skip
    assert lws.code == 0 and saved.read_text() == lws.out
    if len(rows) > 1:  # another row shows its own commands
        rows[1].click()
        second = doc["deployments"][1]
        assert driver.find_element(By.ID, "disagg-decode").text == second["decode_node_command"]
        rows[0].click()
    shot(driver, "disagg")
    option.click()  # as the other tests expect the form


def _paste(driver: WebDriver, text: str) -> str:
    """Check `text` (a YAML manifest: set whole, as a paste does) and the verdict shown."""
    field = driver.find_element(By.CSS_SELECTOR, '#check-form [name="sglang"]')
    driver.execute_script("arguments[0].value = arguments[1]", field, text)
    driver.execute_script("document.getElementById('check-verdict').textContent = ''")
    driver.find_element(By.ID, "check-run").click()
    WebDriverWait(driver, 60, poll_frequency=0.05).until(
        lambda d: d.find_element(By.ID, "check-verdict").text
    )
    return driver.find_element(By.ID, "check-verdict").text


def test_a_manifest_with_replicas_shows_every_copys_gpus(
    page: tuple[WebDriver, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The verdict counts what the CLI's JSON counts: a lone Deployment of 3 copies of TP 2
    (`manifest.gpus`), and a PD manifest whose prefill LWS runs 3 groups
    (`deployment.gpus`), not one copy's GPUs."""
    from tests.test_lws_replicas import _ROUTER, _server

    driver, url = page
    open_view(driver, url, "check")
    single = _server("Deployment", "a", "null", 2, 1, 3)
    copies = cli(capsys, "validate", "--sglang", single)["manifest"]
    assert copies["gpus"] == 6
    shown = _paste(driver, single)
    assert shown.startswith("✓ valid") and f": {copies['gpus']} GPU(s):" in shown, shown
    pd = "---\n".join(
        [
            _server("LeaderWorkerSet", "p", "prefill", 4, 1, 3),
            _server("LeaderWorkerSet", "d", "decode", 4, 1, None),
            _ROUTER,
        ]
    )
    deployment = cli(capsys, "validate", "--sglang", pd)["deployment"]
    assert deployment["gpus"] == 16
    shown = _paste(driver, pd)
    assert shown.startswith("✓ valid deployment") or shown.startswith("✗ invalid deployment")
    assert shown.endswith(f"4 server(s), 1 router(s), {deployment['gpus']} GPU(s)"), shown
