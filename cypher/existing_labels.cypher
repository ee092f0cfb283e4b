// Every node label in the database (an adoption refuses a label that is not there).
CALL db.labels() YIELD label RETURN collect(label) AS labels
