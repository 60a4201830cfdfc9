"""torchvision.io as onnx2pytorch imports it: every name refuses to run."""

from .._unavailable import unavailable

ImageReadMode = unavailable("torchvision.io.ImageReadMode")
decode_image = unavailable("torchvision.io.decode_image")
