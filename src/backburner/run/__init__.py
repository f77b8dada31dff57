"""`run`: one bulk job started on the back burner, or a running tree moved there (`job`)."""
