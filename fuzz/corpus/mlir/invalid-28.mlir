

func.func @softmax_grad(%dy: tensor<4xf32>, %y: tensor<5xf32>) {
  // expected-error @+1 {{'dsc.softmax_grad' op gradient has shape [4], expected [5]}}
  %0 = dsc.softmax_grad %dy, %y : (tensor<4xf32>, tensor<5xf32>) -> tensor<5xf32>
  return
}

