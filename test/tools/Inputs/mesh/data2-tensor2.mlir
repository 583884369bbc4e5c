// Collectives on a data = 2 x tensor = 2 mesh. Ranks count tensor fastest:
// tensor groups {0, 1} and {2, 3}, data groups {0, 2} and {1, 3}.
module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 2, pipeline = 1>} {
  func.func @collectives(%x: tensor<4xf32> {dsc.state = #dsc.state<param, "x">},
                         %h: tensor<2xbf16> {dsc.state = #dsc.state<param, "h">})
      -> (tensor<4xf32> {dsc.state = #dsc.state<output, "sum_tensor">},
          tensor<4xf32> {dsc.state = #dsc.state<output, "sum_data">},
          tensor<4xf32> {dsc.state = #dsc.state<output, "max_tensor">},
          tensor<4xf32> {dsc.state = #dsc.state<output, "mean_data">},
          tensor<2xf32> {dsc.state = #dsc.state<output, "reduce_scatter_tensor">},
          tensor<8xf32> {dsc.state = #dsc.state<output, "all_gather_data">},
          tensor<4xf32> {dsc.state = #dsc.state<output, "all_to_all_tensor">},
          tensor<2xf32> {dsc.state = #dsc.state<output, "shard_data">},
          tensor<4xf32> {dsc.state = #dsc.state<output, "broadcast_data_root1">},
          tensor<2xbf16> {dsc.state = #dsc.state<output, "broadcast_tensor_bf16">},
          tensor<4xf32> {dsc.state = #dsc.state<output, "recv_tensor">},
          tensor<4xf32> {dsc.state = #dsc.state<output, "recv_data">}) {
    %st = dsc.all_reduce %x {op = #dsc<reduce sum>, axis = #dsc<axis tensor>} : (tensor<4xf32>) -> tensor<4xf32>
    %sd = dsc.all_reduce %x {op = #dsc<reduce sum>, axis = #dsc<axis data>} : (tensor<4xf32>) -> tensor<4xf32>
    %mt = dsc.all_reduce %x {op = #dsc<reduce max>, axis = #dsc<axis tensor>} : (tensor<4xf32>) -> tensor<4xf32>
    %md = dsc.all_reduce %x {op = #dsc<reduce mean>, axis = #dsc<axis data>} : (tensor<4xf32>) -> tensor<4xf32>
    %rs = dsc.reduce_scatter %x {op = #dsc<reduce sum>, axis = #dsc<axis tensor>} : (tensor<4xf32>) -> tensor<2xf32>
    %ag = dsc.all_gather %x {axis = #dsc<axis data>} : (tensor<4xf32>) -> tensor<8xf32>
    %aa = dsc.all_to_all %x {axis = #dsc<axis tensor>} : (tensor<4xf32>) -> tensor<4xf32>
    %sh = dsc.shard %x {axis = #dsc<axis data>} : (tensor<4xf32>) -> tensor<2xf32>
    %bd = dsc.broadcast %x {root = 1, axis = #dsc<axis data>} : (tensor<4xf32>) -> tensor<4xf32>
    %bt = dsc.broadcast %h {root = 0, axis = #dsc<axis tensor>} : (tensor<2xbf16>) -> tensor<2xbf16>
    dsc.send %x {peer = 1, axis = #dsc<axis tensor>} : (tensor<4xf32>) -> ()
    %rt = dsc.recv {peer = -1, axis = #dsc<axis tensor>} : () -> tensor<4xf32>
    dsc.send %x {peer = -1, axis = #dsc<axis data>} : (tensor<4xf32>) -> ()
    %rd = dsc.recv {peer = 1, axis = #dsc<axis data>} : () -> tensor<4xf32>
    return %st, %sd, %mt, %md, %rs, %ag, %aa, %sh, %bd, %bt, %rt, %rd : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<8xf32>, tensor<4xf32>, tensor<2xf32>, tensor<4xf32>, tensor<2xbf16>, tensor<4xf32>, tensor<4xf32>
  }
}
