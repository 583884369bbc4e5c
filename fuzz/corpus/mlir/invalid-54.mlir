

func.func @softmax_dropout_grad_shape(%g: tensor<2x8x8xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'dsc.softmax_dropout_grad' op gradient has shape [2, 8, 8], expected [2, 8, 4]}}
  %d = dsc.softmax_dropout_grad %g, %p, %p {rate = 0.1 : f64} : (tensor<2x8x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return
}

