"""GreenHub traces: readers per layout, cleaning, selection, PCHIP resampling, time-zone shifts, storage, synthetic dumps."""
