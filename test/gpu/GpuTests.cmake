# The GPU tests (ctest label gpu), defined once for the build tree
# (test/CMakeLists.txt) and for the GPU bundle's own ctest project
# (test/gpu/bundle/CMakeLists.txt, packed by scripts/gpu-bundle.sh). Each
# exits 77 (skipped) with the reason where no GPU can be used.
#
#   gpu-backend          the CUDA backend against the CPU backend: every
#                        kernel, 20 training steps, graphs, the kernel cache
#                        (run-gpu-tests.sh)
#   gpu-torch-extension  dsc-translate --emit-torch-extension JIT-built with
#                        the PyTorch on the machine, launchers against torch
#                        ops (torch-extension-gpu.sh)
function(dsc_add_gpu_tests bin_dir src_dir)
  add_test(NAME gpu-backend
           COMMAND ${src_dir}/test/gpu/run-gpu-tests.sh ${bin_dir} ${src_dir})
  add_test(NAME gpu-torch-extension
           COMMAND ${src_dir}/test/gpu/torch-extension-gpu.sh ${bin_dir} ${src_dir})
  set_tests_properties(gpu-backend gpu-torch-extension PROPERTIES
                       LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800)
endfunction()
