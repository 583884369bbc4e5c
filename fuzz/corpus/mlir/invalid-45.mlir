

func.func @bias_gelu_grad_dbias(%h: tensor<2x24xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.bias_gelu_grad' op bias gradient has shape [2], expected [24]}}
  %dh, %db = dsc.bias_gelu_grad tanh %h, %h, %b : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<2xf32>)
  return
}

