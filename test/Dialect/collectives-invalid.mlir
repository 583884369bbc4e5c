// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// Every collective's shapes against its axis's group size, and the mesh.

module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 2, pipeline = 1>} {
  func.func @reduce_scatter_indivisible(%g: tensor<6x3xf32>) {
    // expected-error @+1 {{dimension 0 of the input (6) is not divisible by the data axis (4 ranks)}}
    %r = dsc.reduce_scatter %g : (tensor<6x3xf32>) -> tensor<1x3xf32>
    return
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 2, pipeline = 1>} {
  func.func @reduce_scatter_shape(%g: tensor<8x3xf32>) {
    // expected-error @+1 {{result has shape [2, 3], expected [4, 3]}}
    %r = dsc.reduce_scatter %g {axis = #dsc<axis tensor>} : (tensor<8x3xf32>) -> tensor<2x3xf32>
    return
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 2, pipeline = 1>} {
  func.func @all_gather_shape(%p: tensor<2x3xf32>) {
    // expected-error @+1 {{result has shape [4, 3], expected [8, 3]}}
    %r = dsc.all_gather %p : (tensor<2x3xf32>) -> tensor<4x3xf32>
    return
  }
}

// -----

func.func @all_gather_scalar(%p: tensor<f32>) {
  // expected-error @+1 {{expects a tensor of rank >= 1}}
  %r = dsc.all_gather %p : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @all_gather_type(%p: tensor<2xf32>) {
  // expected-error @+1 {{changes the element type}}
  %r = dsc.all_gather %p : (tensor<2xf32>) -> tensor<2xbf16>
  return
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 2, pipeline = 1>} {
  func.func @broadcast_root(%p: tensor<2xf32>) {
    // expected-error @+1 {{root 2 is not a rank of the tensor axis (2 ranks)}}
    %r = dsc.broadcast %p {root = 2, axis = #dsc<axis tensor>} : (tensor<2xf32>) -> tensor<2xf32>
    return
  }
}

// -----

func.func @broadcast_type(%p: tensor<2xf32>) {
  // expected-error @+1 {{result type must equal the input type}}
  %r = dsc.broadcast %p {root = 0} : (tensor<2xf32>) -> tensor<3xf32>
  return
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 2, pipeline = 1>} {
  func.func @all_to_all_indivisible(%p: tensor<6xf32>) {
    // expected-error @+1 {{dimension 0 of the input must be divisible by the data axis (4 ranks)}}
    %r = dsc.all_to_all %p : (tensor<6xf32>) -> tensor<6xf32>
    return
  }
}

// -----

// Without a mesh every group has one rank: no peer exists.
func.func @send_no_peer(%p: tensor<2xf32>) {
  // expected-error @+1 {{peer offset 1 does not name another rank of the pipeline axis (1 rank)}}
  dsc.send %p {peer = 1} : (tensor<2xf32>) -> ()
  return
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 4>} {
  func.func @recv_self() {
    // expected-error @+1 {{peer offset 0 does not name another rank of the pipeline axis (4 ranks)}}
    %r = dsc.recv {peer = 0} : () -> tensor<2xf32>
    return
  }
}

// -----

// expected-error @+1 {{mesh axes must have at least one rank, got data = 0, tensor = 1, pipeline = 1}}
module attributes {dsc.mesh = #dsc.mesh<data = 0, tensor = 1, pipeline = 1>} {
}

// -----

// expected-error @+1 {{'dsc.mesh' must be a #dsc.mesh<...>}}
module attributes {dsc.mesh = 4 : i64} {
}

// -----

module {
  // expected-error @+1 {{'dsc.mesh' belongs on the module}}
  func.func @mesh_on_function() attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>} {
    return
  }
}

// -----

// The split of the data axis (dsc.mesh_data_inner): the group sizes of
// data_inner (2) and data_outer (8 / 2 = 4).
module attributes {dsc.mesh = #dsc.mesh<data = 8, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64} {
  func.func @data_outer_shape(%g: tensor<8x3xf32>) {
    // expected-error @+1 {{result has shape [4, 3], expected [2, 3]}}
    %r = dsc.reduce_scatter %g {axis = #dsc<axis data_outer>} : (tensor<8x3xf32>) -> tensor<4x3xf32>
    return
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 8, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64} {
  func.func @data_inner_shape(%p: tensor<2x3xf32>) {
    // expected-error @+1 {{result has shape [8, 3], expected [4, 3]}}
    %r = dsc.all_gather %p {axis = #dsc<axis data_inner>} : (tensor<2x3xf32>) -> tensor<8x3xf32>
    return
  }
}

// -----

// expected-error @+1 {{'dsc.mesh_data_inner' (3) must divide the mesh's data axis (4 ranks)}}
module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 3 : i64} {
}

// -----

// expected-error @+1 {{'dsc.mesh_data_inner' must be an integer on a module with a 'dsc.mesh'}}
module attributes {dsc.mesh_data_inner = 2 : i64} {
}
