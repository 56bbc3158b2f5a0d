package run

// Plugins says where terraform finds provider plugins.
type Plugins struct {
	// Mirror is a filesystem mirror (unpacked layout) holding the pinned providers.
	Mirror string
	// CacheDir is the plugin cache shared by all runs on this machine or volume, for the
	// providers terraform downloads; providers of the mirror are linked from the mirror.
	CacheDir string
	// AllowDownload lets terraform download providers the mirror does not hold.
	AllowDownload bool
}
