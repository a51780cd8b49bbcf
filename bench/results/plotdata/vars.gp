ns_systems = 'pto omp-gcc omp-clang starpu tbb'
metg_systems = 'pto omp-gcc omp-clang starpu tbb'
inf_bar = 3000
