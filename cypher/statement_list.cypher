// Fragment (one-statement path): a list of generated expressions ({{items}}, comma-joined).
[{{items}}]
