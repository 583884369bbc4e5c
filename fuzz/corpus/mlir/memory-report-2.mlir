

module {
  // expected-error @+1 {{argument #0 of @micro_step has no #dsc.state}}
  func.func @micro_step(%x: tensor<2xf32>) -> () {
    return
  }
  func.func @apply_step() -> () {
    return
  }
}

