// Matcher: the total degree of a pattern node's candidate entities (what fetching their relationships costs).
UNWIND $cands AS c
MATCH (t:IsoragEntity {isorag_eid: c})
RETURN sum(COUNT { (t)--() }) AS degree
