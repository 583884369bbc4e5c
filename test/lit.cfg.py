# -*- Python -*-
import os
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

config.substitutions.append(("%examples", os.path.join(config.dsc_src_root, "examples")))
config.substitutions.append(("%reference", os.path.join(config.dsc_src_root, "test", "reference")))
# Debian's python3-torch imports only under the system interpreter.
config.substitutions.append(("%torch_python", "/usr/bin/python3"))

# NVRTC (CUDA toolkit found at configure time, no GPU needed).
if config.dsc_have_nvrtc.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("nvrtc")
# nvcc compiles the emitted host launchers too.
if config.dsc_nvcc and os.path.exists(config.dsc_nvcc):
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", config.dsc_nvcc))

# A GPU the CUDA backend can use (the `gpu` tests); absent on the CI machine.
try:
    if subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                      timeout=30).returncode == 0:
        config.available_features.add("cuda-device")
except (OSError, subprocess.TimeoutExpired):
    pass

tools = ["dsc-opt", "dsc-run", "dsc-translate", "FileCheck", "not", "count"]
llvm_config.add_tool_substitutions(tools, [config.dsc_tools_dir, config.llvm_tools_dir])
