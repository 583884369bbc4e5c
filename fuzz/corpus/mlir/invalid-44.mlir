

func.func @bias_gelu_bias(%h: tensor<2x24xf32>, %b: tensor<23xf32>) {
  // expected-error @+1 {{'dsc.bias_gelu' op bias has shape [23], expected [24]}}
  %a = dsc.bias_gelu tanh %h, %b : (tensor<2x24xf32>, tensor<23xf32>) -> tensor<2x24xf32>
  return
}

