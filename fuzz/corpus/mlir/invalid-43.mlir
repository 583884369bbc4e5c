

func.func @grad_from_output_beta(%y: tensor<2x8x24xf32>, %g: tensor<24xf32>, %b: tensor<23xf32>, %r: tensor<2x8xf32>) {
  // expected-error @+1 {{'dsc.layer_norm_grad_from_output' op normalization parameter has shape [23], expected [24]}}
  %dx, %dg, %db = dsc.layer_norm_grad_from_output %y, %y, %g, %b, %r : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<23xf32>, tensor<2x8xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>)
  return
}

