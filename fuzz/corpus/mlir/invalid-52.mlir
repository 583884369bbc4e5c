

func.func @dropout_bias_grad_rate(%dy: tensor<2x24xf32>) {
  // expected-error @+1 {{'dsc.dropout_bias_grad' op expects rate in [0, 1), got 1.500000e+00}}
  %dx, %db = dsc.dropout_bias_grad %dy {rate = 1.5 : f64, stream = 1 : i64} : (tensor<2x24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>)
  return
}

