

func.func @softmax_dropout_probs(%s: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'dsc.softmax_dropout' op probs has shape [2, 8, 4], expected [2, 8, 8]}}
  %d, %p = dsc.softmax_dropout %s {rate = 0.1 : f64, stream = 3 : i64} : (tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x4xf32>)
  return
}

