// Collectives on a data = 1 x tensor = 2 x pipeline = 2 mesh: pipeline
// groups {0, 2} and {1, 3}; the data axis has one rank (its collectives
// leave every value as it is).
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 2>} {
  func.func @stages(%x: tensor<3xf32> {dsc.state = #dsc.state<param, "x">})
      -> (tensor<3xf32> {dsc.state = #dsc.state<output, "from_previous_stage">},
          tensor<3xf32> {dsc.state = #dsc.state<output, "sum_pipeline">},
          tensor<3xf32> {dsc.state = #dsc.state<output, "sum_data">},
          tensor<3xf32> {dsc.state = #dsc.state<output, "broadcast_pipeline_root1">}) {
    dsc.send %x {peer = 1, axis = #dsc<axis pipeline>} : (tensor<3xf32>) -> ()
    %r = dsc.recv {peer = -1, axis = #dsc<axis pipeline>} : () -> tensor<3xf32>
    %sp = dsc.all_reduce %x {op = #dsc<reduce sum>, axis = #dsc<axis pipeline>} : (tensor<3xf32>) -> tensor<3xf32>
    %sd = dsc.all_reduce %x {op = #dsc<reduce sum>, axis = #dsc<axis data>} : (tensor<3xf32>) -> tensor<3xf32>
    %b = dsc.broadcast %x {root = 1, axis = #dsc<axis pipeline>} : (tensor<3xf32>) -> tensor<3xf32>
    return %r, %sp, %sd, %b : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
}
