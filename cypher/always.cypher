// Fragment: the condition of a generated WHERE clause with nothing to check.
true
