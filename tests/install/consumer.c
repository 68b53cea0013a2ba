/* Built against an installed rix, through pkg-config and through find_package (scripts/test.sh). */
#include <rix/rix.h>
#include <stdio.h>

int main(void)
{
	rix_master_index *mi;
	if (rix_master_index_new(&mi) != 0)
		return 1;
	rix_id id = { { 1 } };
	int rc = rix_master_index_has(mi, RIX_BLOB_DATA, &id) ? 1 : 0;
	rix_master_index_free(mi);
	printf("consumer ok\n");
	return rc;
}
