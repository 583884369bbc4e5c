// A receive no rank sends to.
module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>} {
  func.func @unmatched(%x: tensor<3xf32> {dsc.state = #dsc.state<param, "x">}) -> (tensor<3xf32> {dsc.state = #dsc.state<output, "r">}) {
    %r = dsc.recv {peer = 1, axis = #dsc<axis data>} : () -> tensor<3xf32>
    return %r : tensor<3xf32>
  }
}
