

func.func @layer_norm_gamma(%x: tensor<2x24xf32>, %g: tensor<23xf32>) {
  // expected-error @+1 {{'dsc.layer_norm' op normalization parameter has shape [23], expected [24]}}
  %0 = dsc.layer_norm %x, %g, %g {epsilon = 1.0e-5 : f64} : (tensor<2x24xf32>, tensor<23xf32>, tensor<23xf32>) -> tensor<2x24xf32>
  return
}

