"""Builds and exercises an extension written by dsc-translate --emit-torch-extension.

usage (with the torch under test, e.g. Debian's /usr/bin/python3):
  torch_ext.py check                 exit 0 when this torch can build an
                                     extension here (headers, libs, pybind11,
                                     Python.h), without importing torch
  torch_ext.py build DIR NVCC ARCH CUDA_INCLUDE CUDA_LIB
                                     compile DIR's extension by hand as
                                     torch.utils.cpp_extension would (nvcc for
                                     the .cu, g++ for binding.cpp, in parallel)
                                     and link DIR/build/NAME.so against the
                                     toolkit's include and library dirs
  torch_ext.py cpu DIR               load DIR/build/NAME.so and call every
                                     launcher with CPU tensors: each must fail
                                     with the one-line TypeError, not crash

The hand build is what lets a CPU-only torch compile the bindings (its
CUDAExtension would link torch's CUDA libraries, which it lacks).
"""
import importlib.util
import os
import subprocess
import sys
import sysconfig


def torch_dir():
    spec = importlib.util.find_spec("torch")
    return spec.submodule_search_locations[0] if spec else None


def check():
    root = torch_dir()
    if root is None:
        return 1
    include = os.path.join(root, "include")
    pybind = [os.path.join(include, "pybind11"), "/usr/include/pybind11"]
    ok = (os.path.exists(os.path.join(include, "torch", "extension.h"))
          and os.path.exists(os.path.join(root, "lib", "libtorch_python.so"))
          and any(os.path.exists(os.path.join(p, "pybind11.h")) for p in pybind)
          and os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))
    return 0 if ok else 1


def import_ext(ext_dir):
    sys.path.insert(0, ext_dir)
    import dsc_ext
    return dsc_ext


def build(ext_dir, nvcc, arch, cuda_include, cuda_lib):
    import torch
    import torch.utils.cpp_extension as cpp

    dsc_ext = import_ext(ext_dir)
    out = os.path.join(ext_dir, "build")
    os.makedirs(out, exist_ok=True)
    abi = "-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI)
    # torch's own nvcc defines come first, as in cpp_extension, so that the
    # extension's -U flags are what undo them.
    cu = [nvcc, *cpp.COMMON_NVCC_FLAGS, *dsc_ext.NVCC_FLAGS, "-arch=" + arch,
          "-Xcompiler", "-fPIC", "-c", os.path.join(ext_dir, "dsc_extension.cu"),
          "-o", os.path.join(out, "dsc_extension.o")]
    # Debian torch 1.13 headers use std::iterator, deprecated in C++17.
    cxx = ["g++", *dsc_ext.CXX_FLAGS, "-fPIC", abi, "-Wno-deprecated-declarations",
           "-DTORCH_EXTENSION_NAME=" + dsc_ext.NAME, "-DTORCH_API_INCLUDE_EXTENSION_H",
           *["-I" + p for p in cpp.include_paths()],
           "-I" + sysconfig.get_paths()["include"], "-I" + cuda_include,
           "-c", os.path.join(ext_dir, "binding.cpp"), "-o", os.path.join(out, "binding.o")]
    jobs = [subprocess.Popen(c) for c in (cu, cxx)]
    if any(j.wait() != 0 for j in jobs):
        return 1
    link = ["g++", "-shared", os.path.join(out, "dsc_extension.o"),
            os.path.join(out, "binding.o"),
            *["-L" + p for p in cpp.library_paths()], "-lc10", "-ltorch",
            "-ltorch_cpu", "-ltorch_python", "-L" + cuda_lib, "-lcudart",
            "-Wl,-rpath," + cuda_lib, "-o", os.path.join(out, dsc_ext.NAME + ".so")]
    return subprocess.call(link)


def cpu(ext_dir):
    import torch

    dsc_ext = import_ext(ext_dir)
    module = dsc_ext.load(os.path.join(ext_dir, "build", dsc_ext.NAME + ".so"))
    missing = [n for n in dsc_ext.LAUNCHERS if not hasattr(module, n)]
    if missing:
        print("not bound:", " ".join(missing))
        return 1
    dtypes = {"float32": torch.float32, "float16": torch.float16,
              "bfloat16": torch.bfloat16, "int32": torch.int32,
              "int64": torch.int64}
    messages = set()
    for name, info in dsc_ext.LAUNCHERS.items():
        args = []
        for p in info["params"]:
            if p["kind"] == "tensor":
                args.append(torch.zeros(p["shapes"][0], dtype=dtypes[p["dtype"]]))
            elif p["kind"] == "tensors":
                args.append([torch.zeros(s) for s in p["shapes"][0]])
            else:
                args.append(0)
        try:
            getattr(dsc_ext, name)(*args)
        except TypeError as e:
            # One line, naming the launcher; the rest varies by launcher.
            msg = str(e)
            if "\n" in msg or not msg.startswith(name + ": argument '"):
                print("bad message from %s: %r" % (name, msg))
                return 1
            messages.add(msg.split("' ", 1)[1])
            continue
        print("%s accepted CPU tensors" % name)
        return 1
    for m in sorted(messages):
        print(m)
    # A table of the wrong length is named before anything else.
    adam = next(n for n, i in dsc_ext.LAUNCHERS.items() if i["op"] == "Adam")
    try:
        getattr(dsc_ext, adam)([torch.zeros(1)], *[[]] * 6, *[torch.zeros(())] * 3)
    except ValueError as e:
        print(str(e).replace(adam, "ADAM"))
    print("checked %d launchers" % len(dsc_ext.LAUNCHERS))
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "check":
        sys.exit(check())
    if cmd == "build":
        sys.exit(build(*sys.argv[2:7]))
    if cmd == "cpu":
        sys.exit(cpu(sys.argv[2]))
    sys.exit("unknown command " + cmd)
