

func.func @attention_grad_dout(%g: tensor<2x3x8x2xf32>, %q: tensor<2x3x8x4xf32>, %l: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'dsc.attention_grad' op gradient has shape [2, 3, 8, 2], expected [2, 3, 8, 4]}}
  %dq, %dk, %dv = dsc.attention_grad %g, %q, %q, %q, %q, %l {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x2xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>)
  return
}

