"""torchvision.ops as onnx2pytorch and onnx2torch import it: every kernel refuses to run."""

from .._unavailable import unavailable

box_convert = unavailable("torchvision.ops.box_convert")
deform_conv2d = unavailable("torchvision.ops.deform_conv2d")
nms = unavailable("torchvision.ops.nms")
roi_align = unavailable("torchvision.ops.roi_align")
roi_pool = unavailable("torchvision.ops.roi_pool")
