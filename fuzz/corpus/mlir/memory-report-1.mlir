

// expected-error @+1 {{not a lowered training step: no @micro_step (run --dsc-train-pipeline first)}}
module {
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

