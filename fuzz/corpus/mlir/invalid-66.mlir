

func.func @attention_grad_lse(%g: tensor<2x3x8x4xf32>, %q: tensor<2x3x8x4xf32>, %l: tensor<2x3xf32>) {
  // expected-error @+1 {{'dsc.attention_grad' op lse has shape [2, 3], expected [2, 3, 8]}}
  %dq, %dk, %dv = dsc.attention_grad %g, %q, %q, %q, %q, %l {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>)
  return
}

