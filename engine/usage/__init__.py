"""What the agents spend: dollar cost per call (:mod:`.prices`) and an index of every call (:mod:`.index`)."""
