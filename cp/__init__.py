"""Context-parallel strategies (zigzag, interleave) over torch.distributed."""
