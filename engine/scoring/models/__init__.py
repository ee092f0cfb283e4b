"""The triple scorers' networks, one per file: their base class TripleScorer, the DDE encoders, the query walk,
DDE+MLP and QR-GAT."""
