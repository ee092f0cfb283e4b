"""The triple scorers' networks, one per file: DDE encoders, the query walk, DDE+MLP and QR-GAT."""
