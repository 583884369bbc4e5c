# -*- Python -*-
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "DSC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dsc_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
# Small models: keep the CPU backend from oversubscribing the CI machine.
config.environment["OMP_NUM_THREADS"] = "2"
config.environment["OPENBLAS_NUM_THREADS"] = "1"
# Spinning OpenMP workers starve each other when lit runs tests in parallel.
config.environment["OMP_WAIT_POLICY"] = "passive"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.dsc_tools_dir, append_path=True)

config.substitutions.append(("%dsc_src_root", config.dsc_src_root))
config.substitutions.append(("%dsc_tools_dir", config.dsc_tools_dir))
config.substitutions.append(("%examples", os.path.join(config.dsc_src_root, "examples")))
config.substitutions.append(("%reference", os.path.join(config.dsc_src_root, "test", "reference")))
# Debian's python3-torch imports only under the system interpreter.
config.substitutions.append(("%torch_python", "/usr/bin/python3"))

# Multi-process tests: real ranks under Open MPI's mpirun on this machine
# (oversubscribed: CI has 2 cores), one OpenMP thread per rank.
mpirun = shutil.which("mpirun")
if config.dsc_have_mpi.upper() in ("ON", "1", "TRUE", "YES") and mpirun:
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", mpirun + " --oversubscribe --allow-run-as-root "
         "-x OMP_NUM_THREADS=1"))
    # A private network namespace (root, CAP_SYS_ADMIN) whose loopback
    # counts what crossed the transport.
    if shutil.which("unshare") and shutil.which("ip") and subprocess.call(
            ["unshare", "-n", "true"], stderr=subprocess.DEVNULL) == 0:
        config.available_features.add("netns")

# NCCL's bootstrap test binary (built with the CUDA backend; NCCL itself is
# loaded at run time).
if os.path.exists(os.path.join(config.dsc_tools_dir, "DscNcclTests")):
    config.available_features.add("nccl")

# NVRTC (CUDA toolkit found at configure time, no GPU needed).
if config.dsc_have_nvrtc.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("nvrtc")
    config.substitutions.append(("%cuda_headers", config.dsc_cuda_include))
# nvcc compiles the emitted host launchers too. The toolkit's include and
# library directories are the ones CMake found: nvcc may be a wrapper script
# (e.g. /usr/local/bin/nvcc) whose path says nothing about where CUDA lives.
if config.dsc_nvcc and os.path.exists(config.dsc_nvcc) and \
        os.path.isdir(config.dsc_cuda_include) and os.path.isdir(config.dsc_cuda_lib):
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", config.dsc_nvcc))
    config.substitutions.append(("%cuda_include", config.dsc_cuda_include))
    config.substitutions.append(("%cuda_lib", config.dsc_cuda_lib))

# Debian's torch can build a C++ extension here (headers, libraries,
# pybind11, Python.h); checked without importing torch.
torch_ext = os.path.join(config.dsc_src_root, "test", "Codegen", "Inputs", "torch_ext.py")
if os.path.exists("/usr/bin/python3") and subprocess.call(
        ["/usr/bin/python3", torch_ext, "check"]) == 0:
    config.available_features.add("torch-headers")

# A CUDA device: `nvidia-smi -L` lists one (the GPU tests themselves are
# ctest's label gpu, test/gpu/GpuTests.cmake).
def lists_gpu():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0 and "GPU" in r.stdout

if shutil.which("nvidia-smi") and lists_gpu():
    config.available_features.add("cuda-device")

tools = ["dsc-opt", "dsc-run", "dsc-translate", "FileCheck", "not", "count"]
llvm_config.add_tool_substitutions(tools, [config.dsc_tools_dir, config.llvm_tools_dir])
