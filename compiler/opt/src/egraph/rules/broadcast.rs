//! Broadcast hoisting: an elementwise op on two broadcasts of the same type is the broadcast
//! of the op on the small operands (one op per source element instead of one per tile
//! element); broadcasts of broadcasts and broadcasts to the same type collapse. All exact:
//! the same op on the same values, only fewer times.

use egg::rewrite as rw;

use super::*;

fn same_as_x(eg: &mut EG, c: Id, s: &Subst) -> bool {
    ty(eg, c).is_some() && ty(eg, c) == ty(eg, s[v("?x")])
}

pub fn rules() -> Vec<Rw> {
    vec![
        rw!("broadcast-same"; "(broadcast ?t ?x)" => "?x" if same_as_x),
        rw!("broadcast-broadcast"; "(broadcast ?t (broadcast ?u ?x))" => "(broadcast ?t ?x)"),
        rw!("hoist-add"; "(add (broadcast ?t ?a) (broadcast ?t ?b))" => "(broadcast ?t (add ?a ?b))" if same_type("?a", "?b")),
        rw!("hoist-sub"; "(sub (broadcast ?t ?a) (broadcast ?t ?b))" => "(broadcast ?t (sub ?a ?b))" if same_type("?a", "?b")),
        rw!("hoist-mul"; "(mul (broadcast ?t ?a) (broadcast ?t ?b))" => "(broadcast ?t (mul ?a ?b))" if same_type("?a", "?b")),
        rw!("hoist-div"; "(div (broadcast ?t ?a) (broadcast ?t ?b))" => "(broadcast ?t (div ?a ?b))" if same_type("?a", "?b")),
        rw!("hoist-max"; "(max (broadcast ?t ?a) (broadcast ?t ?b))" => "(broadcast ?t (max ?a ?b))" if same_type("?a", "?b")),
        rw!("hoist-min"; "(min (broadcast ?t ?a) (broadcast ?t ?b))" => "(broadcast ?t (min ?a ?b))" if same_type("?a", "?b")),
        rw!("hoist-neg"; "(neg (broadcast ?t ?a))" => "(broadcast ?t (neg ?a))"),
        rw!("hoist-exp"; "(exp (broadcast ?t ?a))" => "(broadcast ?t (exp ?a))"),
        rw!("hoist-sqrt"; "(sqrt (broadcast ?t ?a))" => "(broadcast ?t (sqrt ?a))"),
        rw!("hoist-rsqrt"; "(rsqrt (broadcast ?t ?a))" => "(broadcast ?t (rsqrt ?a))"),
    ]
}
