/* SPDX-License-Identifier: MIT */
/* The small library uhb_hazard loads and unloads in a loop. */
int uhb_dso_fn(int x);

int uhb_dso_fn(int x)
{
	return x * 3 + 1;
}
