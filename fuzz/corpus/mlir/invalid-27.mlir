

func.func @gelu_grad(%dy: tensor<4xf32>, %x: tensor<5xf32>) {
  // expected-error @+1 {{'dsc.gelu_grad' op gradient has shape [4], expected [5]}}
  %0 = dsc.gelu_grad tanh %dy, %x : tensor<4xf32>, tensor<5xf32> -> tensor<5xf32>
  return
}

