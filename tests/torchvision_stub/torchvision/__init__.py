"""A stand-in for torchvision, for tests/test_export_consumers.py only: not torchvision.

onnx2pytorch and onnx2torch import torchvision when they are imported, for the ONNX ops
they map to torchvision's kernels (NonMaxSuppression, RoiAlign, MaxRoiPool, DeformConv,
ImageDecoder), none of which `ncet.to_onnx` ever writes; torchvision itself cannot be
installed beside the project's torch. This package has the names those imports ask for
(`torchvision.ops.nms`, `box_convert`, `roi_align`, `roi_pool`, `deform_conv2d`,
`torchvision.io.decode_image`, `ImageReadMode`), each a function that raises
NotImplementedError naming itself, so that a converted model using one would fail loudly
instead of computing something. The test module puts its parent folder on sys.path only
while it runs, and only when the real torchvision is not importable.
"""

from . import io, ops

__all__ = ["io", "ops"]
