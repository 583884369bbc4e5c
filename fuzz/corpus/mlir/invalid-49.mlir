

func.func @residual_layer_norm_sum(%h: tensor<2x24xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.bias_dropout_add_layer_norm' op sum has shape [24, 2], expected [2, 24]}}
  %s, %y, %r = dsc.bias_dropout_add_layer_norm %h, %b, %h, %b, %b {epsilon = 1.0e-5 : f64, rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x24xf32>, tensor<24xf32>, tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<24x2xf32>, tensor<2x24xf32>, tensor<2xf32>)
  return
}

