

func.func @cross_entropy_labels(%l: tensor<2x8x50xf32>, %y: tensor<2x7xi32>) {
  // expected-error @+1 {{'dsc.cross_entropy' op logits [2, 8, 50] do not match labels [2, 7] (expected logits [..., V] over labels [...])}}
  %0 = dsc.cross_entropy %l, %y : (tensor<2x8x50xf32>, tensor<2x7xi32>) -> tensor<f32>
  return
}

