// Bias gradients next to weight gradients, for --bias-grad-epilogues. Each
// case has its own N (the dy columns), so its GEMM is its own row of the
// header's table:
//   N 8   the sum comes first: fused (BGRADA: dy is the GEMM's B)
//   N 12  the sum comes after the GEMM: fused
//   N 16  the bias gradient is read before the GEMM: not fused
//   N 20  a [N, K] weight (transpose_w): fused as BGRADB (dy is A)
//   N 24  a bf16 bias gradient: not fused (the epilogue writes f32)
//   N 28  a sum over part of the rows only ([2, 4, N] -> [4, N]): not fused
//   N 32  the sum after the GEMM, whose input x (a temporary, last read by
//         the GEMM) leaves its bytes to the bias gradient: not fused (the
//         GEMM would write them while reading x)
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 1>} {
func.func @micro_step(
    %x: tensor<4x6xf32> {dsc.state = #dsc.state<param, "x">},
    %dy8: tensor<4x8xf32> {dsc.state = #dsc.state<param, "dy8">},
    %dy12: tensor<4x12xf32> {dsc.state = #dsc.state<param, "dy12">},
    %dy16: tensor<4x16xf32> {dsc.state = #dsc.state<param, "dy16">},
    %dy20: tensor<4x20xf32> {dsc.state = #dsc.state<param, "dy20">},
    %dy24: tensor<4x24xbf16> {dsc.state = #dsc.state<param, "dy24">},
    %x3: tensor<2x4x6xf32> {dsc.state = #dsc.state<param, "x3">},
    %dy28: tensor<2x4x28xf32> {dsc.state = #dsc.state<param, "dy28">},
    %dy32: tensor<4x32xf32> {dsc.state = #dsc.state<param, "dy32">},
    %x40: tensor<4x40xf32> {dsc.state = #dsc.state<param, "x40">},
    %xb: tensor<4x6xbf16> {dsc.state = #dsc.state<param, "xb">},
    %b8: tensor<8xf32> {dsc.state = #dsc.state<grad, "b8">},
    %b12: tensor<12xf32> {dsc.state = #dsc.state<grad, "b12">},
    %b16: tensor<16xf32> {dsc.state = #dsc.state<grad, "b16">},
    %b20: tensor<20xf32> {dsc.state = #dsc.state<grad, "b20">},
    %b24: tensor<24xbf16> {dsc.state = #dsc.state<grad, "b24">},
    %b28: tensor<4x28xf32> {dsc.state = #dsc.state<grad, "b28">},
    %b32: tensor<32xf32> {dsc.state = #dsc.state<grad, "b32">})
    -> (tensor<6x8xf32> {dsc.state = #dsc.state<output, "w8">},
        tensor<8xf32> {dsc.state = #dsc.state<grad, "b8">},
        tensor<6x12xf32> {dsc.state = #dsc.state<output, "w12">},
        tensor<12xf32> {dsc.state = #dsc.state<grad, "b12">},
        tensor<6x16xf32> {dsc.state = #dsc.state<output, "w16">},
        tensor<16xf32> {dsc.state = #dsc.state<grad, "b16">},
        tensor<20x6xf32> {dsc.state = #dsc.state<output, "w20">},
        tensor<20xf32> {dsc.state = #dsc.state<grad, "b20">},
        tensor<6x24xf32> {dsc.state = #dsc.state<output, "w24">},
        tensor<24xbf16> {dsc.state = #dsc.state<grad, "b24">},
        tensor<6x28xf32> {dsc.state = #dsc.state<output, "w28">},
        tensor<4x28xf32> {dsc.state = #dsc.state<grad, "b28">},
        tensor<40x32xf32> {dsc.state = #dsc.state<output, "w32">},
        tensor<32xf32> {dsc.state = #dsc.state<grad, "b32">}) {
  %s8 = dsc.reduce_to %dy8 : (tensor<4x8xf32>) -> tensor<8xf32>
  %w8 = dsc.linear_grad_weight %x, %dy8 : (tensor<4x6xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %a8 = dsc.add %b8, %s8 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>

  %w12 = dsc.linear_grad_weight %x, %dy12 : (tensor<4x6xf32>, tensor<4x12xf32>) -> tensor<6x12xf32>
  %s12 = dsc.reduce_to %dy12 : (tensor<4x12xf32>) -> tensor<12xf32>
  %a12 = dsc.add %b12, %s12 : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>

  %s16 = dsc.reduce_to %dy16 : (tensor<4x16xf32>) -> tensor<16xf32>
  %a16 = dsc.add %b16, %s16 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %w16 = dsc.linear_grad_weight %x, %dy16 : (tensor<4x6xf32>, tensor<4x16xf32>) -> tensor<6x16xf32>

  %s20 = dsc.reduce_to %dy20 : (tensor<4x20xf32>) -> tensor<20xf32>
  %w20 = dsc.linear_grad_weight %x, %dy20 {transpose_w = true} : (tensor<4x6xf32>, tensor<4x20xf32>) -> tensor<20x6xf32>
  %a20 = dsc.add %b20, %s20 : (tensor<20xf32>, tensor<20xf32>) -> tensor<20xf32>

  %s24 = dsc.reduce_to %dy24 : (tensor<4x24xbf16>) -> tensor<24xbf16>
  %w24 = dsc.linear_grad_weight %xb, %dy24 : (tensor<4x6xbf16>, tensor<4x24xbf16>) -> tensor<6x24xf32>
  %a24 = dsc.add %b24, %s24 : (tensor<24xbf16>, tensor<24xbf16>) -> tensor<24xbf16>

  %s28 = dsc.reduce_to %dy28 : (tensor<2x4x28xf32>) -> tensor<4x28xf32>
  %w28 = dsc.linear_grad_weight %x3, %dy28 : (tensor<2x4x6xf32>, tensor<2x4x28xf32>) -> tensor<6x28xf32>
  %a28 = dsc.add %b28, %s28 : (tensor<4x28xf32>, tensor<4x28xf32>) -> tensor<4x28xf32>

  %t32 = dsc.scale %x40 {factor = 2.0 : f64} : (tensor<4x40xf32>) -> tensor<4x40xf32>
  %w32 = dsc.linear_grad_weight %t32, %dy32 : (tensor<4x40xf32>, tensor<4x32xf32>) -> tensor<40x32xf32>
  %s32 = dsc.reduce_to %dy32 : (tensor<4x32xf32>) -> tensor<32xf32>
  %a32 = dsc.add %b32, %s32 : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>

  return %w8, %a8, %w12, %a12, %w16, %a16, %w20, %a20, %w24, %a24, %w28, %a28, %w32, %a32
    : tensor<6x8xf32>, tensor<8xf32>, tensor<6x12xf32>, tensor<12xf32>,
      tensor<6x16xf32>, tensor<16xf32>, tensor<20x6xf32>, tensor<20xf32>,
      tensor<6x24xf32>, tensor<24xbf16>, tensor<6x28xf32>, tensor<4x28xf32>,
      tensor<40x32xf32>, tensor<32xf32>
}
func.func @apply_step() {
  return
}
}
