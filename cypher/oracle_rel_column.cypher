// Fragment (oracle): a pattern edge's relationship as [head eid, type, tail eid], under its variable's name.
{{triple}} AS {{rel}}
