// Fragment: two variables of a generated statement bound to different entities.
{{a}} <> {{b}}
