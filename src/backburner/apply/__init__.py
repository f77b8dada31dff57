"""`apply`: what a distribution ships to keep bulk work on the back burner (`install`: the
udev rule, the drop-ins and the slice, written and removed), and whether it is installed
and live (`status`: `apply --status`)."""
