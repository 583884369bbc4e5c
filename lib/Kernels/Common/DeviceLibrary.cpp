//===- DeviceLibrary.cpp - The CUDA device library's text -----------------===//

#include "Common/DeviceLibrary.h"

const char *dsc::cuda::deviceLibrary() {
  return
#include "CudaDeviceLibrary.inc"
      ;
}
