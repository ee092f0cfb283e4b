// Fragment: the relationship {{rel}} as [head eid, type, tail eid], as stored.
[startNode({{rel}}).isorag_eid, type({{rel}}), endNode({{rel}}).isorag_eid]
