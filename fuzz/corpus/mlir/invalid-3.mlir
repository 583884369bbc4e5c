

func.func @add_mixed_types(%a: tensor<4xbf16>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'dsc.add' op mixes element types 'bf16' and 'f16'}}
  %0 = dsc.add %a, %b : (tensor<4xbf16>, tensor<4xf16>) -> tensor<4xf32>
  return
}

