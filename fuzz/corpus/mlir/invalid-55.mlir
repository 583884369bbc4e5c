

func.func @softmax_dropout_grad_dropped(%p: tensor<2x8x4xf32>, %d: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'dsc.softmax_dropout_grad' op dropped has shape [2, 8, 8], expected [2, 8, 4]}}
  %g = dsc.softmax_dropout_grad %p, %p, %d {rate = 0.1 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x8xf32>) -> tensor<2x8x4xf32>
  return
}

