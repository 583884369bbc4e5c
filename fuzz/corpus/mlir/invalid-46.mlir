

func.func @bias_dropout_add_residual(%h: tensor<2x24xf32>, %b: tensor<24xf32>, %r: tensor<3x24xf32>) {
  // expected-error @+1 {{'dsc.bias_dropout_add' op residual has shape [3, 24], expected [2, 24]}}
  %y = dsc.bias_dropout_add %h, %b, %r {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x24xf32>, tensor<24xf32>, tensor<3x24xf32>) -> tensor<2x24xf32>
  return
}

