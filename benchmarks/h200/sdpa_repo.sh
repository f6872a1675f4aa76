# Sourced by the `bench commits` scripts: `sdpa_repo DIR` makes a git repository in DIR whose `attn.py` is
# cuDNN SDPA as a plain function, committed and tagged `base`; the caller commits its variants on top.
sdpa_repo() {
    mkdir -p "$1" && cd "$1" || return 1
    git init -q -b main
    git config user.name bench && git config user.email bench@example.com
    cat > attn.py <<'PY'
"""cuDNN SDPA as a plain function: the harness finds `is_causal` and `scale` in the signature."""
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def attn(q, k, v, is_causal=True, scale=None):
    # Pinned to cuDNN on a GPU, so PyTorch's automatic choice cannot change what is measured.
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION] if q.is_cuda else [SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    return out
PY
    git add attn.py && git commit -q -m "cuDNN SDPA" && git tag base
}
