func.func @micro_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = dsc.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}
